import{u as t}from"./index-a0waCzxc.js";function n(){return t("p",{class:"lead",children:"Not built yet."})}export{n as OwnTokens};
